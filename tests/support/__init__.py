"""Real local stand-ins (package indexes, conda channels, wheels) shared by the tests."""
