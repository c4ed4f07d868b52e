//! Engine definitions added over the API, written once for both backends.

use super::backend::Backend;
use super::sql::{Columns, Reads, Tx, Value};
use super::{StoreResult, StoredEngine};

/// The columns [`stored`] reads.
const COLUMNS: &str = "name, definition, updated_at, updated_by";

/// A row of [`COLUMNS`].
fn stored(r: &impl Columns) -> StoreResult<StoredEngine> {
    Ok(StoredEngine {
        name: r.text("name")?,
        definition: r.text("definition")?,
        updated_at: r.time("updated_at")?,
        updated_by: r.text("updated_by")?,
    })
}

/// See [`crate::store::Store::put_engine`]. The insert that does nothing on a conflict tells
/// a new name from a known one, also when two calls race (the second waits for the first's
/// row, then updates it).
pub(crate) async fn put_engine(
    db: &impl Backend,
    name: &str,
    definition: &str,
    updated_by: &str,
) -> StoreResult<(StoredEngine, bool)> {
    let values = [
        Value::Text(name),
        Value::Text(definition),
        Value::Time(db.clock().now()),
        Value::Text(updated_by),
    ];
    let mut tx = db.begin().await?;
    let insert = format!(
        "INSERT INTO engines (name, definition, updated_at, updated_by) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
    );
    let (row, created) = match tx.row(&insert, &values).await? {
        Some(row) => (row, true),
        None => {
            let update = format!(
                "UPDATE engines SET definition = $2, updated_at = $3, updated_by = $4
                 WHERE name = $1 RETURNING {COLUMNS}"
            );
            let row = tx
                .row(&update, &values)
                .await?
                .ok_or_else(|| anyhow::anyhow!("engine `{name}` vanished during its update"))?;
            (row, false)
        }
    };
    let engine = stored(&row)?;
    tx.commit().await?;
    Ok((engine, created))
}

/// See [`crate::store::Store::engines`].
pub(crate) async fn engines(db: &impl Reads) -> StoreResult<Vec<StoredEngine>> {
    let sql = format!("SELECT {COLUMNS} FROM engines ORDER BY name");
    db.rows(&sql, &[]).await?.iter().map(stored).collect()
}
