"""Views: documents -> terminal tables, SVG, PNG and HTML. They read documents and compute nothing."""
