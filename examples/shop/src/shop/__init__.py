"""A tiny shop: prices, carts, taxes and checkout."""
