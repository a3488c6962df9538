"""Online learning, auctions and games: one module per chapter (see the registry in iclr_lab.core)."""
