"""Graph capture, export passes and the .qmodel writer."""
