"""Live run status and progress as Server-Sent Events."""
