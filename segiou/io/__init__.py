"""Storage adapters: open and validate mask stores, read masks. No metric math."""
