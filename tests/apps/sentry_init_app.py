"""sentry_app's handlers, with Sentry enabled by the application itself, payloads
included: prefork.contrib.sentry.init(dsn, send_payload=True) at import."""
import os

import sentry_app  # noqa: F401  (registers the handlers)

from prefork.contrib import sentry

sentry.init(os.environ["SENTRY_TEST_DSN"], send_payload=True)
