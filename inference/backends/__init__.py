"""One module per backend, all behind the `Backend` protocol in `base`."""
