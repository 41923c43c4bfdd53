"""`prefork-queue bench`: how fast the queue goes, measured on your database.

For each worker count it runs the real supervisor on a scratch queue and, on
MySQL, the textbook one-job-per-transaction loop as a baseline; see driver.py
for the order of things, measure.py for what is measured, report.py for the
output. The handlers it runs are in prefork/bench/jobs.py.

The package imports nothing itself: the CLI's parser (scale_names.py) and every
bench child (jobs.py, the supervisor's --app) take only the module they need.
"""
