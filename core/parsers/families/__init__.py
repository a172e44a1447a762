"""One module per parser family; importing this package registers them all."""
