"""Django settings for Django's own Tasks tests (tests/contrib/test_django_suite.py) run
against prefork.contrib.django: those of Django's runtests.py that the tests rely on
(USE_TZ off, Django's default TIME_ZONE), our app, and the database from the
environment: PQ_SUITE_DB_ENGINE (sqlite or mysql), PQ_SUITE_DB_NAME (the SQLite file, or
the MariaDB database on PREFORK_TEST_DB_HOST:PORT as root, which the test runner
recreates as its test database) and PQ_SUITE_MYSQL_DRIVER (pymysql or mysqlclient)."""
import os

# Django's async tests call the synchronous API (get_result(), refresh(), the dummy's
# `results`) inside their event loop: free for Django's in-memory backends, a query for
# ours, which Django refuses there unless told the caller knows (one test coroutine).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

SECRET_KEY = "django-tasks-suite"
USE_TZ = False   # as Django's tests/test_sqlite.py: TaskTestCase turns it on itself
INSTALLED_APPS = ["prefork.contrib.django"]
TASKS = {"default": {"BACKEND": "backends.DummyBackend"}}

NAME = os.environ["PQ_SUITE_DB_NAME"]
if os.environ["PQ_SUITE_DB_ENGINE"] == "mysql":
    if os.environ.get("PQ_SUITE_MYSQL_DRIVER", "pymysql") == "pymysql":
        import pymysql
        pymysql.version_info = (2, 2, 1, "final", 0)   # Django's check of mysqlclient's version
        pymysql.install_as_MySQLdb()
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.mysql", "NAME": NAME, "TEST": {"NAME": NAME},
        "HOST": os.environ.get("PREFORK_TEST_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("PREFORK_TEST_DB_PORT", "3306"),
        "USER": os.environ.get("PREFORK_TEST_DB_USER", "root"), "PASSWORD": ""}}
else:   # a file: the queue's processes share it (Django's default test database is in memory)
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": NAME,
                             "TEST": {"NAME": NAME}}}
