"""Errors the proxy reports to clients, each with a MySQL code and SQLSTATE.

Every failure a client can see goes through ``ProxyError`` so it reaches the wire
with the right code/SQLSTATE (a Vitess user recognises the texts); anything else
is a bug: logged with its traceback and reported as 1105 (``internal_error``), never swallowed,
never as Python's exception text.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

# code -> SQLSTATE, for the codes the proxy itself produces or passes through often.
SQLSTATES: dict[int, str] = {
    1040: "08004",
    1043: "08S01",
    1044: "42000",
    1045: "28000",
    1046: "3D000",
    1047: "08S01",
    1053: "08S01",
    1049: "42000",
    1051: "42S02",
    1052: "23000",
    1054: "42S22",
    1056: "42000",
    1062: "23000",
    1064: "42000",
    1065: "42000",
    1094: "HY000",
    1105: "HY000",
    1136: "21S01",
    1146: "42S02",
    1149: "42000",
    1193: "HY000",
    1213: "40001",
    1222: "21000",
    1172: "42000",
    1305: "42000",
    1180: "HY000",
    1231: "42000",
    1235: "42000",
    1317: "70100",
    1397: "XAE04",
    1402: "XA100",
    1436: "HY000",
    1364: "HY000",
    1366: "HY000",
    1406: "22001",
    1451: "23000",
    1473: "HY000",
    1568: "25001",
    1452: "23000",
    1690: "22003",
    1815: "HY000",
    1835: "HY000",
    2013: "HY000",
    3024: "HY000",
}

ER_UNKNOWN_ERROR = 1105
ER_DATA_OUT_OF_RANGE = 1690  # "DOUBLE value is out of range in '...'" (an expression at the proxy)
ER_PARSE_ERROR = 1064
ER_EMPTY_QUERY = 1065
ER_NO_SUCH_TABLE = 1146
ER_BAD_FIELD_ERROR = 1054
ER_BAD_DB_ERROR = 1049
ER_NO_DB_ERROR = 1046
ER_NOT_SUPPORTED_YET = 1235
ER_SP_DOES_NOT_EXIST = 1305  # SAVEPOINT x does not exist
ER_TOO_MANY_ROWS = 1172  # SELECT ... INTO with more than one row
ER_NET_PACKET_TOO_LARGE = 1153  # a statement beyond max_allowed_packet
ER_ACCESS_DENIED = 1045
ER_UNKNOWN_COM = 1047
ER_SERVER_SHUTDOWN = 1053  # "Server shutdown in progress": a long-lived statement ended by the proxy's stop
ER_WRONG_VALUE_FOR_VAR = 1231
ER_QUERY_INTERRUPTED = 1317
ER_QUERY_TIMEOUT = 3024  # max_execution_time / QUERY_TIMEOUT_MS ran out (proxy.running_statement)
ER_NO_SUCH_THREAD = 1094  # KILL of an id no session has
ER_UNKNOWN_SYSTEM_VARIABLE = 1193
ER_STACK_OVERRUN_NEED_MORE = 1436  # a statement nested too deep (rewriter.errors.StackOverrun)
ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT = 1473  # more than 63 nested selects
# Distributed transactions (transaction_mode, proxy.twopc)
ER_ERROR_DURING_COMMIT = 1180  # a 2PC commit whose outcome is not known yet (the resolver finishes it)
ER_XAER_NOTA = 1397  # XA COMMIT/ROLLBACK of an xid the shard does not hold (finished, or attached elsewhere)
ER_XA_RBROLLBACK = 1402  # a 2PC commit that was rolled back (a participant failed to prepare)
ER_CANT_CHANGE_TX_CHARACTERISTICS = 1568  # SET transaction_mode inside a transaction that touched a shard
ER_DUP_ENTRY = 1062
ER_DUP_FIELDNAME = 1060
ER_WRONG_VALUE_COUNT_ON_ROW = 1136
ER_LOCK_WAIT_TIMEOUT = 1205
ER_WRONG_ARGUMENTS = 1210  # COM_STMT_EXECUTE with the wrong number of parameters
ER_OPERAND_COLUMNS = 1241
ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT = 1222
ER_SUBQUERY_NO_1_ROW = 1242
ER_UNKNOWN_STMT_HANDLER = 1243
ER_DBACCESS_DENIED = 1044
ER_TABLE_EXISTS = 1050
ER_BAD_TABLE = 1051
ER_WRONG_TABLE_NAME = 1103
ER_TABLEACCESS_DENIED = 1142
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_NON_UPDATABLE_TABLE = 1288
ER_CONNECTION_KILLED = 1927
# Client-side errors (the MySQL client library's CR_* codes), as PyMySQL raises them.
CR_CONNECTION_ERROR = 2002
CR_CONN_HOST_ERROR = 2003
CR_SERVER_GONE_ERROR = 2006
CR_SERVER_LOST = 2013
CR_COMMANDS_OUT_OF_SYNC = 2014
CR_MALFORMED_PACKET = 2027
CR_SERVER_LOST_EXTENDED = 2055
ER_INTERNAL_ERROR = 1815  # Vitess's Code_INTERNAL errors (ALTER VSCHEMA that cannot apply)


def sqlstate_for(code: int) -> str:
    return SQLSTATES.get(code, "HY000")


class ProxyError(Exception):
    """An error with a MySQL code, sent to the client as an ERR packet."""

    def __init__(self, code: int, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.sqlstate = sqlstate or sqlstate_for(code)

    def __str__(self) -> str:
        return f"{self.message} (errno {self.code}) (sqlstate {self.sqlstate})"


class SyntaxError_(ProxyError):  # noqa: N801 - "SyntaxError" is a builtin
    def __init__(self, message: str) -> None:
        super().__init__(ER_PARSE_ERROR, message)


class UnsupportedError(ProxyError):
    def __init__(self, message: str) -> None:
        super().__init__(ER_NOT_SUPPORTED_YET, message)


class ShardError(ProxyError):
    """A MySQL error raised by a shard, passed through with its code, naming the shard."""

    def __init__(self, keyspace: str, shard: str, code: int, message: str) -> None:
        super().__init__(code, f"target: {keyspace}.{shard}.primary: {message}")
        self.keyspace = keyspace
        self.shard = shard
        self.shard_message = message


class ShardUnavailable(ProxyError):
    """A shard cannot be reached (down, refusing connections, connection lost)."""

    def __init__(self, keyspace: str, shard: str, cause: str) -> None:
        super().__init__(
            ER_UNKNOWN_ERROR,
            f"target: {keyspace}.{shard}.primary: shard {keyspace}/{shard} is unavailable: {cause}",
            "HY000",
        )
        self.keyspace = keyspace
        self.shard = shard


def internal_error(e: BaseException, connection_id: int | None = None) -> ProxyError:
    """A failure that is the proxy's own fault (no MySQL error describes it): logged whole, with
    its traceback, for the operator; the client gets MySQL's 1105 saying where to look, never
    Python's exception text."""
    logger.error(
        "internal error", exc_info=e, extra={"connection_id": connection_id, "error_type": type(e).__name__}
    )
    where = "" if connection_id is None else f" (connection {connection_id})"
    return ProxyError(ER_UNKNOWN_ERROR, f"Unknown error: the proxy failed internally{where}; see its log")
