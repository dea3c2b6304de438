"""``doctor``'s logic: qualify this host with a real scratch run (``qualification``), the typed
facts it gathers and the report built from them (``findings``), the scratch child and its
directory (``scratch``), and the human rendering (``render``). The CLI is ``cli/doctor.py``."""
