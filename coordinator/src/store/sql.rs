//! The narrow surface the shared store code asks of a backend: run a statement written once
//! (portable SQL with `$N` markers, which sqlx binds by number on SQLite too) with a few kinds
//! of values, and read its columns by what they mean rather than by their storage type.
//!
//! Each backend keeps only what differs: Postgres stores times as `timestamptz` and documents
//! as `jsonb`, SQLite as unix milliseconds and text; Postgres has 32-bit columns where SQLite
//! has one integer type. Everything above this module reads the same on both.

use anyhow::Context;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Column, PgPool, Postgres, Row, Sqlite, SqlitePool, Transaction, TypeInfo};

use super::{StoreError, StoreResult};
use sweep_domain::limit::Limit;

/// The limit a stored `(depth, nodes_limit)` pair names (see the `0003_limits` migration);
/// anything else is a corrupt row.
pub(crate) fn limit_of(depth: i32, nodes_limit: i64) -> StoreResult<Limit> {
    Limit::from_key(depth, nodes_limit).ok_or_else(|| {
        StoreError::Internal(anyhow::anyhow!(
            "stored limit (depth {depth}, nodes {nodes_limit}) is not a limit"
        ))
    })
}

/// A value bound to a `$N` marker.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    /// Any integer column.
    Int(i64),
    /// A text column.
    Text(&'a str),
    /// A point in time, in the backend's time representation.
    Time(DateTime<Utc>),
    /// A nullable integer column.
    OptInt(Option<i64>),
    /// A nullable text column.
    OptText(Option<&'a str>),
    /// A boolean column.
    Flag(bool),
    /// A binary column.
    Bytes(&'a [u8]),
    /// A JSON document column, in the backend's document representation.
    Json(&'a serde_json::Value),
    /// A list of integers: a list parameter of an id test (see `Backend::in_list`) or a
    /// list column (a lease's jobs); Postgres binds an `int8[]`, SQLite a JSON array.
    Ints(&'a [i64]),
}

/// Reading one column of a row by what it holds. A column that does not decode is an internal
/// error naming it (a query and its mapping disagree), never a panic.
pub(crate) trait Columns {
    /// An integer column of any width.
    fn int(&self, col: &str) -> StoreResult<i64>;
    /// A nullable integer column of any width.
    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>>;
    /// A text column.
    fn text(&self, col: &str) -> StoreResult<String>;
    /// A nullable text column.
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>>;
    /// A boolean column (or expression).
    fn flag(&self, col: &str) -> StoreResult<bool>;
    /// A timestamp column.
    fn time(&self, col: &str) -> StoreResult<DateTime<Utc>>;
    /// A nullable timestamp column.
    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>>;
    /// A JSON document column, decoded.
    fn json<T: DeserializeOwned>(&self, col: &str) -> StoreResult<T>;
    /// A binary column.
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>>;
    /// A list-of-integers column (see [`Value::Ints`]).
    fn ints(&self, col: &str) -> StoreResult<Vec<i64>>;

    /// A count (never negative; a negative one reads as 0).
    fn count(&self, col: &str) -> StoreResult<u64> {
        Ok(self.int(col)?.max(0) as u64)
    }

    /// The search limit stored in columns `depth` and `nodes_limit`.
    fn limit(&self) -> StoreResult<Limit> {
        let depth = self.int("depth")?;
        let depth = i32::try_from(depth)
            .map_err(|_| StoreError::Internal(anyhow::anyhow!("stored depth {depth}")))?;
        limit_of(depth, self.int("nodes_limit")?)
    }
}

/// Running a read statement; implemented by each backend's read pool.
#[async_trait]
pub(crate) trait Reads: Sync {
    /// The backend's row.
    type Row: Columns + Send;
    /// Every row of `sql` with `values` bound to `$1`, `$2`, ...
    async fn rows(&self, sql: &str, values: &[Value<'_>]) -> StoreResult<Vec<Self::Row>>;
    /// The first row of `sql`, if any.
    async fn row(&self, sql: &str, values: &[Value<'_>]) -> StoreResult<Option<Self::Row>>;
}

/// A write transaction of the backend: statements run in order, nothing is visible to others
/// before [`Tx::commit`], and dropping it uncommitted rolls everything back.
#[async_trait]
pub(crate) trait Tx: Send {
    /// The backend's row.
    type Row: Columns + Send;
    /// Every row of `sql` with `values` bound to `$1`, `$2`, ...
    async fn rows(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<Vec<Self::Row>>;
    /// The first row of `sql` with `values` bound to `$1`, `$2`, ..., if any.
    async fn row(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<Option<Self::Row>>;
    /// Runs `sql`; returns the rows it changed.
    async fn execute(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<u64>;
    /// Makes the transaction's writes visible.
    async fn commit(self) -> StoreResult<()>;
}

/// Whether `e` is a unique-constraint violation, on either backend.
pub(crate) fn is_unique_violation(e: &StoreError) -> bool {
    match e {
        StoreError::Internal(e) => e
            .downcast_ref::<sqlx::Error>()
            .and_then(|e| e.as_database_error())
            .is_some_and(|db| db.is_unique_violation()),
        _ => false,
    }
}

/// A decode failure of `col`, as an internal error.
fn column_error(col: &str, e: sqlx::Error) -> StoreError {
    StoreError::Internal(anyhow::Error::new(e).context(format!("reading column `{col}`")))
}

/// Column `col` of `row` as the type that column decodes to on its backend.
fn get<'r, R, T>(row: &'r R, col: &str) -> StoreResult<T>
where
    R: Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    T: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    row.try_get(col).map_err(|e| column_error(col, e))
}

/// [`Columns`] methods that decode their column as the type they return (see [`get`]).
macro_rules! decoded {
    ($($name:ident -> $t:ty),* $(,)?) => {
        $(
            fn $name(&self, col: &str) -> StoreResult<$t> {
                get(self, col)
            }
        )*
    };
}

/// Whether `col` of `row` is a 32-bit Postgres integer. Asked of the column's declared type
/// rather than learnt from a failed 64-bit decode, because that failure formats an error
/// message on every read of a 32-bit column (about 1 % of the coordinator's CPU under load).
fn is_int4(row: &PgRow, col: &str) -> StoreResult<bool> {
    let column = row.try_column(col).map_err(|e| column_error(col, e))?;
    Ok(column.type_info().name() == "INT4")
}

impl Columns for PgRow {
    fn int(&self, col: &str) -> StoreResult<i64> {
        if is_int4(self, col)? {
            get::<_, i32>(self, col).map(i64::from)
        } else {
            get(self, col)
        }
    }

    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
        if is_int4(self, col)? {
            get::<_, Option<i32>>(self, col).map(|v| v.map(i64::from))
        } else {
            get(self, col)
        }
    }

    decoded! {
        text -> String,
        opt_text -> Option<String>,
        flag -> bool,
        bytes -> Vec<u8>,
        time -> DateTime<Utc>,
        opt_time -> Option<DateTime<Utc>>,
        ints -> Vec<i64>,
    }

    fn json<T: DeserializeOwned>(&self, col: &str) -> StoreResult<T> {
        let value: serde_json::Value = get(self, col)?;
        Ok(serde_json::from_value(value).with_context(|| format!("decoding `{col}`"))?)
    }
}

impl Columns for SqliteRow {
    decoded! {
        int -> i64,
        opt_int -> Option<i64>,
        text -> String,
        opt_text -> Option<String>,
        flag -> bool,
        bytes -> Vec<u8>,
    }

    fn time(&self, col: &str) -> StoreResult<DateTime<Utc>> {
        time_of_ms(col, self.int(col)?)
    }

    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.opt_int(col)?.map(|ms| time_of_ms(col, ms)).transpose()
    }

    fn json<T: DeserializeOwned>(&self, col: &str) -> StoreResult<T> {
        let text: String = self.text(col)?;
        Ok(serde_json::from_str(&text).with_context(|| format!("decoding `{col}`"))?)
    }

    fn ints(&self, col: &str) -> StoreResult<Vec<i64>> {
        self.json(col)
    }
}

/// A time stored as unix milliseconds (SQLite).
fn time_of_ms(col: &str, ms: i64) -> StoreResult<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| {
        StoreError::Internal(anyhow::anyhow!("`{col}` {ms} is out of range as a time"))
    })
}

/// Binds `values` in order to the statement `sql`: every kind of value alike, but times,
/// documents and lists, which each backend encodes its own way (`|t| ...`, `|j| ...` and
/// `|l| ...`).
macro_rules! bind_values {
    ($sql:expr, $values:expr, |$t:ident| $time:expr, |$j:ident| $json:expr, |$l:ident| $list:expr) => {
        $values.iter().fold(sqlx::query($sql), |q, v| match *v {
            Value::Int(i) => q.bind(i),
            Value::Text(t) => q.bind(t),
            Value::OptInt(i) => q.bind(i),
            Value::OptText(t) => q.bind(t),
            Value::Flag(b) => q.bind(b),
            Value::Bytes(b) => q.bind(b),
            Value::Time($t) => q.bind($time),
            Value::Json($j) => q.bind($json),
            Value::Ints($l) => q.bind($list),
        })
    };
}

/// Binds `values` in order to a Postgres statement.
fn pg_query<'q>(sql: &'q str, values: &[Value<'q>]) -> Query<'q, Postgres, PgArguments> {
    bind_values!(sql, values, |t| t, |j| j, |l| l)
}

/// Binds `values` in order to a SQLite statement (times as unix milliseconds, documents and
/// lists as JSON text).
fn sqlite_query<'q>(sql: &'q str, values: &[Value<'q>]) -> Query<'q, Sqlite, SqliteArguments<'q>> {
    bind_values!(
        sql,
        values,
        |t| t.timestamp_millis(),
        |j| j.to_string(),
        |l| serde_json::to_string(l).expect("integers")
    )
}

#[async_trait]
impl Reads for PgPool {
    type Row = PgRow;

    async fn rows(&self, sql: &str, values: &[Value<'_>]) -> StoreResult<Vec<PgRow>> {
        Ok(pg_query(sql, values).fetch_all(self).await?)
    }

    async fn row(&self, sql: &str, values: &[Value<'_>]) -> StoreResult<Option<PgRow>> {
        Ok(pg_query(sql, values).fetch_optional(self).await?)
    }
}

#[async_trait]
impl Reads for SqlitePool {
    type Row = SqliteRow;

    async fn rows(&self, sql: &str, values: &[Value<'_>]) -> StoreResult<Vec<SqliteRow>> {
        sqlite_query(sql, values)
            .fetch_all(self)
            .await
            .map_err(sqlite_error)
    }

    async fn row(&self, sql: &str, values: &[Value<'_>]) -> StoreResult<Option<SqliteRow>> {
        sqlite_query(sql, values)
            .fetch_optional(self)
            .await
            .map_err(sqlite_error)
    }
}

#[async_trait]
impl Tx for Transaction<'static, Postgres> {
    type Row = PgRow;

    async fn rows(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<Vec<PgRow>> {
        Ok(pg_query(sql, values).fetch_all(&mut **self).await?)
    }

    async fn row(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<Option<PgRow>> {
        Ok(pg_query(sql, values).fetch_optional(&mut **self).await?)
    }

    async fn execute(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<u64> {
        Ok(pg_query(sql, values)
            .execute(&mut **self)
            .await?
            .rows_affected())
    }

    async fn commit(self) -> StoreResult<()> {
        Ok(Transaction::commit(self).await?)
    }
}

#[async_trait]
impl Tx for Transaction<'static, Sqlite> {
    type Row = SqliteRow;

    async fn rows(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<Vec<SqliteRow>> {
        sqlite_query(sql, values)
            .fetch_all(&mut **self)
            .await
            .map_err(sqlite_error)
    }

    async fn row(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<Option<SqliteRow>> {
        sqlite_query(sql, values)
            .fetch_optional(&mut **self)
            .await
            .map_err(sqlite_error)
    }

    async fn execute(&mut self, sql: &str, values: &[Value<'_>]) -> StoreResult<u64> {
        sqlite_query(sql, values)
            .execute(&mut **self)
            .await
            .map(|done| done.rows_affected())
            .map_err(sqlite_error)
    }

    async fn commit(self) -> StoreResult<()> {
        Transaction::commit(self).await.map_err(sqlite_error)
    }
}

/// Maps SQLite's passing conditions to [`StoreError::Unavailable`]; the shared conversion in
/// `store/mod.rs` only knows Postgres' SQLSTATE classes.
pub(crate) fn sqlite_error(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        // sqlx reports the extended result code; its low byte is the primary code.
        let primary = db
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .map(|c| c & 0xff);
        // BUSY, LOCKED (another writer holds the file), IOERR, FULL (disk), CANTOPEN: the
        // same request can succeed later.
        if matches!(primary, Some(5 | 6 | 10 | 13 | 14)) {
            return StoreError::Unavailable(e);
        }
    }
    StoreError::from(e)
}

/// Appends the column `col` = `at` to an insert's columns and values when the backend sets
/// the time a row was written itself (`Some`, see `Backend::written_at`).
pub(crate) fn stamp<'a>(
    cols: &mut Vec<&'static str>,
    values: &mut Vec<Value<'a>>,
    col: &'static str,
    at: Option<DateTime<Utc>>,
) {
    if let Some(at) = at {
        cols.push(col);
        values.push(Value::Time(at));
    }
}

/// `INSERT INTO table (cols) VALUES ($1, ..., $n)`, then `tail` (a conflict clause,
/// `RETURNING`).
pub(crate) fn insert_sql(table: &str, cols: &[&str], tail: &str) -> String {
    let marks: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({}) {tail}",
        cols.join(", "),
        marks.join(", ")
    )
}

/// Whether sweep `s` has work open: a build that built lacks a result for a position it is
/// to search. One condition for the summary's state and the stage loop's "stage finished"
/// (`stages::due`), so the two cannot disagree.
macro_rules! work_open {
    () => {
        "(COALESCE((SELECT CAST(sum(p.done) AS BIGINT) FROM result_sums p
                    JOIN builds pb ON pb.id = p.build_id
                    WHERE p.sweep_id = s.id AND pb.build_error IS NULL), 0)
          < COALESCE((SELECT CAST(sum(b.position_count) AS BIGINT) FROM builds b
                      WHERE b.sweep_id = s.id AND b.build_error IS NULL), 0))"
    };
}
pub(crate) use work_open;
