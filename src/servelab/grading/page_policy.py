"""formgrader's pages of a submission as this course serves them (a Jupyter server extension).

formgrader serves two kinds of page under /formgrader/submissions/ in the instructor's server:

- the view of a submission (`<id>/`): as it is sent, the page formgrader's template wrote is
  rebuilt by pages.formgrader_page (sanitized whole, every cell's content in a sandboxed frame
  with an opaque origin, the grading controls outside them) and gets a Content-Security-Policy
  whose scripts are formgrader's own, by a nonce made for this response: no 'unsafe-inline', no
  inline handler. A page that cannot be rebuilt is not sent (500, with the reason in the log);
- a file from the submission's folder (`<id>/<path>`, anything `nbgrader collect` brought in):
  sandboxed with no scripts at all, so a student's .html or .svg opened there runs nothing in the
  instructor's session.

It also serves the frames' stylesheet (pages.frame_css) at <base_url>/servelab/submission-frame.css:
a frame with an opaque origin sends no cookie, so what it loads must need none.

Enabled with `jpserver_extensions` in grading/jupyter/jupyter_server_config.d/, which
the class hub adds to each instructor's Jupyter config path.
"""

from __future__ import annotations

import functools

from jupyter_server.utils import url_path_join
from tornado.web import OutputTransform, RequestHandler

from servelab.grading import pages

VIEW = "view"
FILE_POLICY = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'none'"
NAVIGATION = {"next", "prev", "next_incorrect", "prev_incorrect"}  # formgrader's redirects to the next submission


def policy_for(path: str, prefix: str) -> str | None:
    """The policy for a request path, given formgrader's submissions prefix ("/formgrader/submissions/")."""
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix) :].strip("/").split("/")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in NAVIGATION):
        return VIEW
    return FILE_POLICY


class SubmissionPagePolicy(OutputTransform):
    """Rebuild formgrader's view of a submission and set its policy; sandbox the submission's files."""

    def __init__(self, prefix: str, base_url: str, log, request):
        super().__init__(request)
        self.kind = policy_for(request.path, prefix)
        self.base_url, self.log = base_url, log
        self.nonce = pages.new_nonce()
        self.rebuild = False
        self.body: list[bytes] = []
        self.status = 200

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if self.kind is None:
            return status_code, headers, chunk
        if self.kind != VIEW:
            headers["Content-Security-Policy"] = self.kind
            return status_code, headers, chunk
        headers["Content-Security-Policy"] = pages.formgrader_policy(self.nonce)
        # Each response has its own nonce: a cached copy (or a 304 for one) would carry a stale one.
        headers.pop("Etag", None)
        headers["Cache-Control"] = "no-store"
        self.rebuild = status_code == 200 and headers.get("Content-Type", "").startswith("text/html")
        if not self.rebuild:
            return status_code, headers, chunk
        self.body.append(chunk)
        if not finishing:  # held until the page is whole: it is rebuilt as one document
            headers.pop("Content-Length", None)
            return status_code, headers, b""
        status_code, page = self._page()
        headers["Content-Length"] = str(len(page))
        if status_code != 200:
            headers["Content-Type"] = "text/plain; charset=UTF-8"
        return status_code, headers, page

    def transform_chunk(self, chunk, finishing):
        if not self.rebuild:
            return chunk
        self.body.append(chunk)
        return self._page()[1] if finishing else b""

    def _page(self) -> tuple[int, bytes]:
        try:
            page = pages.formgrader_page(b"".join(self.body).decode("utf-8"), self.nonce, self.base_url)
            return 200, page.encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - whatever failed, send no page rather than formgrader's unrebuilt one
            self.log.error("servelab: formgrader's view of a submission could not be rebuilt: %r", exc)
            return 500, b"This submission's page could not be drawn safely; the server's log says why.\n"


class FrameStyle(RequestHandler):
    """The stylesheet of a submission's frames: public (a frame with an opaque origin sends no cookie)."""

    def get(self):
        self.set_header("Content-Type", "text/css; charset=UTF-8")
        self.set_header("Cache-Control", "max-age=3600")
        self.write(pages.frame_css())


def _jupyter_server_extension_points():
    return [{"module": "servelab.grading.page_policy"}]


def _load_jupyter_server_extension(serverapp):
    base_url = serverapp.web_app.settings["base_url"]
    prefix = url_path_join(base_url, "formgrader/submissions/")
    # First, so that it sees the page before any encoding (GZip) does.
    serverapp.web_app.transforms.insert(0, functools.partial(SubmissionPagePolicy, prefix, base_url, serverapp.log))
    serverapp.web_app.add_handlers(".*$", [(url_path_join(base_url, pages.FRAME_CSS_PATH), FrameStyle)])
    pages.POLICY_LOADED = True  # pages.RequireRebuiltView draws a view only once this is set
    serverapp.log.info("servelab: Content-Security-Policy on %s", prefix)
