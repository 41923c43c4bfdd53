from django.db import models


class Order(models.Model):
    name = models.CharField(max_length=100)
    marked_by = models.IntegerField(null=True)   # pid of the worker whose task marked it


class Trace(models.Model):
    """One row per task run that asks for it: who ran it, on which connection."""
    label = models.CharField(max_length=100)
    pid = models.IntegerField()
    connection_id = models.BigIntegerField(null=True)
