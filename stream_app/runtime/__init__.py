"""What every long-running part shares with the event loop and the allocator."""
