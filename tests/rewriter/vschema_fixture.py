"""The vschema the planner tests use: an unsharded keyspace with sequences and a
sharded keyspace (two shards) with hash, lookup and reference tables."""

from __future__ import annotations

from vschema.loader import build_vschema

COMMERCE = {
    "sharded": False,
    "tables": {
        "product": {},
        "customer_seq": {"type": "sequence"},
        "corder_seq": {"type": "sequence"},
        "corder_keyspace_idx": {},
    },
}

CUSTOMER = {
    "sharded": True,
    "vindexes": {
        "hash": {"type": "hash"},
        "corder_lookup": {
            "type": "consistent_lookup_unique",
            "params": {"table": "commerce.corder_keyspace_idx", "from": "order_id", "to": "keyspace_id"},
            "owner": "corder",
        },
        "email_lookup": {
            "type": "lookup",
            "params": {"table": "commerce.email_idx", "from": "email", "to": "keyspace_id"},
            "owner": "customer",
        },
    },
    "tables": {
        "customer": {
            "column_vindexes": [
                {"column": "customer_id", "name": "hash"},
                {"column": "email", "name": "email_lookup"},
            ],
            "auto_increment": {"column": "customer_id", "sequence": "commerce.customer_seq"},
        },
        "corder": {
            "column_vindexes": [
                {"column": "customer_id", "name": "hash"},
                {"column": "order_id", "name": "corder_lookup"},
            ],
            "auto_increment": {"column": "order_id", "sequence": "commerce.corder_seq"},
        },
        "country": {"type": "reference"},
        "pinned_settings": {"pinned": "90"},
        "customer_note": {
            "column_vindexes": [{"column": "note_id", "name": "hash"}],
            "columns": [{"name": "note_id", "type": "INT64"}, {"name": "customer_id", "type": "INT64"},
                        {"name": "body", "type": "VARCHAR"}],
            "column_list_authoritative": True,
        },
    },
}


def make_vschema():
    return build_vschema(
        {"commerce": (COMMERCE, ["0"]), "customer": (CUSTOMER, ["-80", "80-"])},
        {"rules": [
            {"from_table": "old_customer", "to_tables": ["customer.customer"]},
            {"from_table": "retired", "to_tables": []},
        ]},
    )
