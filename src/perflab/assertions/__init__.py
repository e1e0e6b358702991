"""Performance claims decided by statistics, and the pytest plugin that offers them."""
