"""Real client libraries and the CLI work through the proxy as against MySQL."""

from __future__ import annotations

import subprocess
import uuid

import aiomysql
import MySQLdb
import MySQLdb.cursors
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


def test_mysqlclient_queries_and_streams(proxy) -> None:
    conn = MySQLdb.connect(host=proxy.host, port=proxy.port, user="root", passwd="", db="lookup")
    try:
        c = conn.cursor()
        c.execute("select sku, price from product order by sku")
        rows = c.fetchall()
        assert len(rows) >= 1
        ss = conn.cursor(MySQLdb.cursors.SSCursor)
        ss.execute("select seq from seq_1_to_5000")
        assert sum(1 for _ in ss) == 5000
        ss.close()
    finally:
        conn.close()


async def test_aiomysql_queries_and_streams(proxy) -> None:
    conn = await aiomysql.connect(host=proxy.host, port=proxy.port, user="root", password="", db="lookup")
    try:
        async with conn.cursor() as c:
            await c.execute("select count(*) from product")
            (n,) = await c.fetchone()
            assert n >= 1
        async with conn.cursor(aiomysql.SSCursor) as c:
            await c.execute("select seq from seq_1_to_3000")
            got = 0
            while rows := await c.fetchmany(500):
                got += len(rows)
            assert got == 3000
    finally:
        conn.close()


class Base(DeclarativeBase):
    pass


def test_sqlalchemy_reflects_inserts_and_queries_through_the_orm(proxy) -> None:
    table = f"orm_{uuid.uuid4().hex[:6]}"

    class Widget(Base):
        __tablename__ = table
        id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
        name: Mapped[str] = mapped_column(sa.String(64))

    engine = sa.create_engine(f"mysql+pymysql://root:@{proxy.host}:{proxy.port}/lookup")
    try:
        Base.metadata.create_all(engine, tables=[Widget.__table__])
        with Session(engine) as s:
            s.add_all([Widget(name="a"), Widget(name="b")])
            s.commit()
            assert [w.name for w in s.query(Widget).order_by(Widget.id)] == ["a", "b"]
        reflected = sa.Table(table, sa.MetaData(), autoload_with=engine)
        assert [c.name for c in reflected.columns] == ["id", "name"]
        assert reflected.c.id.primary_key
        assert table in sa.inspect(engine).get_table_names()
    finally:
        Base.metadata.drop_all(engine, tables=[Widget.__table__])
        engine.dispose()


def test_mariadb_cli_quick(proxy) -> None:
    out = subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{proxy.port}", "-uroot", "--quick", "--batch", "-e",
         "use lookup; select seq from seq_1_to_3; show vitess_shards"],
        capture_output=True, text=True, timeout=30, check=True,
    )
    lines = out.stdout.split()
    assert lines[:4] == ["seq", "1", "2", "3"]
    assert "commerce/-80" in lines


def test_sqlalchemy_orm_on_a_sharded_table_uses_the_sequence(proxy) -> None:
    engine = sa.create_engine(f"mysql+pymysql://root:@{proxy.host}:{proxy.port}/commerce")
    try:
        customer = sa.Table("customer", sa.MetaData(), autoload_with=engine)
        assert [c.name for c in customer.columns] == ["customer_id", "email", "tenant_id", "created_at"]

        class Sharded(DeclarativeBase):
            pass

        class Customer(Sharded):
            # The shards' DDL has no AUTO_INCREMENT (ids come from the vschema's sequence),
            # so the model says the key is generated, as a Vitess user's model does.
            __tablename__ = "customer"
            customer_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=True)
            email: Mapped[bytes] = mapped_column(sa.LargeBinary)
            tenant_id: Mapped[int] = mapped_column(sa.BigInteger)

        tag = uuid.uuid4().hex[:8].encode()
        with Session(engine) as s:
            rows = [Customer(email=b"orm-" + tag + bytes([65 + i]), tenant_id=42) for i in range(4)]
            s.add_all(rows)
            s.commit()
            ids = sorted(r.customer_id for r in rows)
            assert len(set(ids)) == 4 and all(i > 0 for i in ids)
            found = s.query(Customer).filter(Customer.customer_id.in_(ids)).order_by(Customer.customer_id)
            assert [c.customer_id for c in found] == ids
    finally:
        engine.dispose()
