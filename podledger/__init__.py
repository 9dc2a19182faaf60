"""podledger."""
