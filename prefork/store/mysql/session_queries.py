"""The statement a session's set-up script starts with (session._set_up): the
driver's SET NAMES, which PyMySQL would otherwise send alone, a round trip of
its own. The character set is the one session.CHARSET gives the driver."""

SET_NAMES = "SET NAMES utf8mb4"
