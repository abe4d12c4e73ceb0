"""The console's screens (one per mode) and its modal dialogs."""
