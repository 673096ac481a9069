"""A Content-Security-Policy on formgrader's pages of a submission (a Jupyter server extension).

The main defence is that formgrader draws a submission as inert HTML (safe_html.py).
This adds a second one, in the browser, on the two kinds of page formgrader serves
under /formgrader/submissions/ in the instructor's server:

- the view of a submission (`<id>/`): scripts and styles only from the server itself
  (and the CDN nbconvert's MathJax comes from), requests only to the server, no
  frames, plugins, <base> or form posts elsewhere. formgrader's page needs its own
  inline scripts, and MathJax evaluates its configuration, so 'unsafe-inline' and
  'unsafe-eval' stay: the policy limits where a page loads from and talks to, the
  sanitizer is what keeps a student's script out;
- a file from the submission's folder (`<id>/<path>`, anything `nbgrader collect`
  brought in): sandboxed with no scripts at all, so a student's .html or .svg opened
  there runs nothing in the instructor's session.

Enabled with `jpserver_extensions` in grading/jupyter/jupyter_server_config.d/, which
the class hub adds to each instructor's Jupyter config path.
"""

from __future__ import annotations

import functools

from jupyter_server.utils import url_path_join
from tornado.web import OutputTransform

MATHJAX_CDN = "https://cdnjs.cloudflare.com"  # nbconvert's HTMLExporter.mathjax_url, used by formgrader's page
VIEW_POLICY = "; ".join(
    [
        "default-src 'self'",
        f"script-src 'self' 'unsafe-inline' 'unsafe-eval' {MATHJAX_CDN}",
        f"style-src 'self' 'unsafe-inline' {MATHJAX_CDN}",
        f"font-src 'self' data: {MATHJAX_CDN}",
        "img-src 'self' data:",
        "connect-src 'self'",
        "frame-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ]
)
FILE_POLICY = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'none'"
NAVIGATION = {"next", "prev", "next_incorrect", "prev_incorrect"}  # formgrader's redirects to the next submission


def policy_for(path: str, prefix: str) -> str | None:
    """The policy for a request path, given formgrader's submissions prefix ("/formgrader/submissions/")."""
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix) :].strip("/").split("/")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in NAVIGATION):
        return VIEW_POLICY
    return FILE_POLICY


class SubmissionPagePolicy(OutputTransform):
    """Set the policy on each response under formgrader's submissions prefix (Jupyter's own CSP elsewhere)."""

    def __init__(self, prefix: str, request):
        super().__init__(request)
        self.policy = policy_for(request.path, prefix)

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        if self.policy:
            headers["Content-Security-Policy"] = self.policy
        return status_code, headers, chunk


def _jupyter_server_extension_points():
    return [{"module": "servelab.grading.page_policy"}]


def _load_jupyter_server_extension(serverapp):
    prefix = url_path_join(serverapp.web_app.settings["base_url"], "formgrader/submissions/")
    serverapp.web_app.transforms.append(functools.partial(SubmissionPagePolicy, prefix))
    serverapp.log.info("servelab: Content-Security-Policy on %s", prefix)
