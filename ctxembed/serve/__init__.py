"""The live page: ``ctxembed serve`` answers JSON requests with the documents of ``--json`` and serves one
offline page that draws them with the saved HTML view's renderer.

- :mod:`ctxembed.serve.endpoints` turns a request body into a document through :class:`ctxembed.Explorer`
  (one per distinct settings, cached), with the page's input limits;
- :mod:`ctxembed.serve.server` is the HTTP server (the standard library's ``ThreadingHTTPServer``): routes,
  the Host check against DNS rebinding, request sizes, errors as one line;
- ``web/`` holds the page (live.html, live.js, live.css); the drawing is ``ctxembed/views/web/view.js``.
"""
