//! Statements a write unit holds back, to run with its next call to the connection's thread.

use crate::sql::Stmt;
use crate::sql::stmt::Binds;
use futures_util::TryStreamExt;
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqliteRow};
use sqlx::{AssertSqlSafe, Either, Executor, Sqlite};

/// Statements a write unit holds back ([`Later`]) before it sends them without waiting for a
/// read: the held text stays short, and so does the writer's statement cache.
pub(super) const MAX_LATER: usize = 4;

/// Statements run for their effect alone ([`Backend::execute_later`]), held back to go with
/// the unit's next call to the connection's thread or its commit: one hand-off instead of one
/// per statement. sqlx's SQLite driver runs a multi-statement text as one call, binding from
/// one shared list, so each held `$n` is renumbered past those before it (a driver feature
/// pinned by the lockfile and `tests.rs`: docs/DECISIONS.md, "SQLite group commit").
///
/// [`Backend::execute_later`]: crate::sql::Backend::execute_later
#[derive(Default)]
pub(super) struct Later {
    sql: String,
    args: SqliteArguments,
    pub(super) statements: usize,
    /// The first `opens` statements open the unit's savepoint (`RELEASE`, `SAVEPOINT`).
    pub(super) opens: usize,
}

/// What a call that ran held statements returns of its last statement.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// Its first row only (the call stops reading there).
    First,
    All,
    Count,
    /// The first row of each statement after the held ones (selects read together).
    Each,
}

/// The last statement's rows and count; for [`Want::Each`], each statement's first row.
#[derive(Default)]
pub(super) struct Ran {
    pub(super) rows: Vec<SqliteRow>,
    pub(super) changed: u64,
    pub(super) firsts: Vec<Option<SqliteRow>>,
}

impl Later {
    pub(super) fn is_empty(&self) -> bool {
        self.statements == 0
    }

    /// Appends a statement of the unit's opening (no parameters; before any other).
    pub(super) fn push_opening(&mut self, statement: &str) {
        self.sql.push_str(statement);
        self.sql.push_str(";\n");
        self.statements += 1;
        self.opens += 1;
    }

    /// Appends `stmt`, its parameters renumbered after those held before it.
    pub(super) fn push(&mut self, stmt: Stmt<'_>) -> Result<(), sqlx::Error> {
        let (sql, args) = stmt.into_parts();
        renumber(&sql, sqlx::Arguments::len(&self.args), &mut self.sql);
        self.sql.push_str(";\n");
        <Sqlite as Binds>::add_all(&mut self.args, args).map_err(sqlx::Error::Encode)?;
        self.statements += 1;
        Ok(())
    }

    /// Runs the statements in one call, answering `want` of those after the first `held` (a held
    /// one returning a row is a misuse); an error comes with how many statements finished first.
    pub(super) async fn run(
        self,
        conn: &mut SqliteConnection,
        held: usize,
        want: Want,
    ) -> Result<Ran, (sqlx::Error, usize)> {
        let mut ran = Ran::default();
        if want == Want::Each {
            ran.firsts = (held..self.statements).map(|_| None).collect();
        }
        let mut steps = conn.fetch_many(sqlx::query_with(AssertSqlSafe(self.sql), self.args));
        let mut done = 0;
        while let Some(step) = steps.try_next().await.map_err(|e| (e, done))? {
            match step {
                Either::Left(result) => {
                    done += 1;
                    ran.changed = result.rows_affected();
                }
                Either::Right(_) if done < held => {
                    let misuse = "a statement run later returned a row";
                    return Err((sqlx::Error::Protocol(misuse.into()), done));
                }
                Either::Right(row) if want == Want::Each => {
                    if let Some(first) = ran.firsts.get_mut(done - held)
                        && first.is_none()
                    {
                        *first = Some(row);
                    }
                }
                Either::Right(row) => {
                    ran.rows.push(row);
                    if want == Want::First {
                        break;
                    }
                }
            }
        }
        Ok(ran)
    }
}

/// Appends `sql` to `out`, each parameter `$n` outside a quoted literal written `$(n + by)`.
fn renumber(sql: &str, by: usize, out: &mut String) {
    if by == 0 {
        out.push_str(sql);
        return;
    }
    let mut quoted = false;
    let mut rest = sql;
    while let Some(at) = rest.find(['\'', '$']) {
        out.push_str(&rest[..at]);
        let (mark, after) = rest[at..].split_at(1);
        out.push_str(mark);
        rest = after;
        if mark == "'" {
            quoted = !quoted; // an escaped quote ('') toggles twice
            continue;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if quoted || digits == 0 {
            continue;
        }
        let n: usize = rest[..digits].parse().unwrap_or(0);
        out.push_str(&(n + by).to_string());
        rest = &rest[digits..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_statements_parameters_are_renumbered_outside_quoted_literals() {
        let mut out = String::new();
        renumber(
            "select $1, '$1 $2', $10 where x = $2 and y = 'it''s $3'",
            5,
            &mut out,
        );
        assert_eq!(
            out,
            "select $6, '$1 $2', $15 where x = $7 and y = 'it''s $3'"
        );
        let mut out = String::new();
        renumber("select $1", 0, &mut out);
        assert_eq!(out, "select $1");
    }
}
