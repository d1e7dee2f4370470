"""Side panels of the main window; each observes the Session and sends it intents."""
