"""Integrations with frameworks (each in its own subpackage, imported only by the
applications that use it: prefork itself never imports a framework)."""
