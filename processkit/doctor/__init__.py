"""``doctor``'s logic: qualify this host with a real scratch run (``qualification``), the typed
facts it gathers and the report built from them (``findings``), the scratch child and its
directory (``scratch``). Parsing and rendering are ``cli/doctor.py``."""
