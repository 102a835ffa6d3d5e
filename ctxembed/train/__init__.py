"""Training W_query, W_key, W_value (and W_out) by backpropagation, in NumPy."""
