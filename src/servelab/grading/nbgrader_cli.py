"""nbgrader's command line, less a 2.5-second import it never uses.

jsonschema imports rfc3987_syntax, when installed, to check "iri" string formats;
building that module's grammar takes about 2.5 s on a 2-core CPU, in every nbgrader
process (one per autograded submission). The notebook schema nbformat validates
against has no such format, so this entry point marks the module absent first.

    python -m servelab.grading.nbgrader_cli autograde lesson25 --student ada
"""

import sys

# an import of it now raises ImportError, which jsonschema expects
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # typeshed: modules only; None is valid

from nbgrader.apps.nbgraderapp import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
