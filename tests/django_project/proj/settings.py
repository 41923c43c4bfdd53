"""A small Django project on the prefork queue, for tests/contrib/test_django.py. The database
comes from the environment: PQ_TEST_DB_ENGINE (sqlite or mysql) and PQ_TEST_DB_NAME
(the SQLite file, or the MariaDB database on PREFORK_TEST_DB_HOST:PORT as root). The
same database is `manage.py test`'s (made anew: SQLite's default is in memory, where
the queue's processes could not share it)."""
import os

import django

SECRET_KEY = "test-only"
USE_TZ = True
TIME_ZONE = "Europe/Zagreb"   # not UTC: times must come back right anyway
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = ["django.contrib.contenttypes", "prefork.contrib.django", "shop"]
if django.VERSION < (6, 0):
    INSTALLED_APPS.insert(1, "django_tasks")   # the backport

if os.environ["PQ_TEST_DB_ENGINE"] == "mysql":
    if os.environ.get("PQ_TEST_MYSQL_DRIVER", "pymysql") == "pymysql":
        import pymysql
        pymysql.version_info = (2, 2, 1, "final", 0)   # Django's check of mysqlclient's version
        pymysql.install_as_MySQLdb()
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.mysql", "NAME": os.environ["PQ_TEST_DB_NAME"],
        "TEST": {"NAME": os.environ["PQ_TEST_DB_NAME"]},
        "HOST": os.environ.get("PREFORK_TEST_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("PREFORK_TEST_DB_PORT", "3306"),
        "USER": os.environ.get("PREFORK_TEST_DB_USER", "root"), "PASSWORD": ""}}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                             "NAME": os.environ["PQ_TEST_DB_NAME"],
                             "TEST": {"NAME": os.environ["PQ_TEST_DB_NAME"]}}}

TASKS = {"default": {
    "BACKEND": "prefork.contrib.django.TaskBackend",
    "QUEUES": ["default", "emails"],
    "OPTIONS": {"database": "default", "max_attempts": 2, "max_result_bytes": 1024,
                "store_traceback": os.environ.get("PQ_TEST_TRACEBACK") == "1"}}}
