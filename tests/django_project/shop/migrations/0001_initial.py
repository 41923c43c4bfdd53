from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []
    operations = [
        migrations.CreateModel("Order", [
            ("id", models.BigAutoField(primary_key=True, serialize=False)),
            ("name", models.CharField(max_length=100)),
            ("marked_by", models.IntegerField(null=True))]),
        migrations.CreateModel("Trace", [
            ("id", models.BigAutoField(primary_key=True, serialize=False)),
            ("label", models.CharField(max_length=100)),
            ("pid", models.IntegerField()),
            ("connection_id", models.BigIntegerField(null=True))]),
    ]
