package engine

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The raw-insert benchmark (`sluice bench --scenario raw-insert`) measures
// what the database itself does with sluice's kind of rows and none of
// sluice's code in the path: a plain table, the same pool and durability
// settings as everything else, and the fastest way the dialect has to
// commit a transaction of rows. It is the physical limit sluice's own
// figures are set against; raw-insert-naive keeps the plain form (one
// INSERT statement a row) beside it.

// RawMethod names the way RawInsert commits n rows: "insert" (one
// single-row INSERT statement, a transaction by itself), "copy" (the
// dialect's CopyFrom, PostgreSQL's COPY, as a transaction by itself) or
// "values" (multi-row INSERT ... VALUES statements in one transaction,
// chunked below the driver's variable and packet limits).
func (e *Engine) RawMethod(n int) string {
	switch {
	case n <= 1:
		return "insert"
	case e.d.CopyFrom != nil:
		return "copy"
	}
	return "values"
}

// RawSetup creates the raw-insert benchmark's table, dropping any left
// from an earlier run.
func (e *Engine) RawSetup(ctx context.Context) error {
	if _, err := e.w.ExecContext(ctx, e.q[qBenchDropTable]); err != nil {
		return err
	}
	_, err := e.w.ExecContext(ctx, e.q[qBenchCreateTable])
	return err
}

// RawInsert commits one row per payload in one transaction, the fastest
// way the dialect has (see RawMethod): one row by a single INSERT
// statement that commits by itself (no BEGIN and COMMIT round trips, as
// sluice's own lone statements run); more rows by COPY where the dialect
// has CopyFrom, else by multi-row INSERT statements.
func (e *Engine) RawInsert(ctx context.Context, payloads [][]byte) error {
	switch e.RawMethod(len(payloads)) {
	case "insert":
		if len(payloads) == 0 {
			return nil
		}
		_, err := e.exec(ctx, e.w, qBenchInsert, payloads[0])
		return e.committed(err)
	case "copy":
		return e.rawCopy(ctx, payloads)
	}
	return e.rawValues(ctx, payloads)
}

// RawInsertNaive commits one row per payload with one single-row INSERT
// statement each, in one transaction: the form most applications write.
func (e *Engine) RawInsertNaive(ctx context.Context, payloads [][]byte) error {
	return e.inTx(ctx, func(tx *sql.Tx) error {
		for _, p := range payloads {
			if _, err := e.exec(ctx, tx, qBenchInsert, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// RawTeardown drops the raw-insert benchmark's table and the multi-row
// statements RawInsert prepared.
func (e *Engine) RawTeardown(ctx context.Context) error {
	e.stmtMu.Lock()
	var err error
	for k, st := range e.stmts {
		if strings.HasPrefix(k.name, rawRowsPrefix) {
			err = st.Close()
			delete(e.stmts, k)
		}
	}
	e.stmtMu.Unlock()
	_, derr := e.w.ExecContext(ctx, e.q[qBenchDropTable])
	if derr != nil {
		return derr
	}
	return err
}

// rawCopy loads the rows with the dialect's CopyFrom, the COPY statement
// committing by itself.
func (e *Engine) rawCopy(ctx context.Context, payloads [][]byte) error {
	rows := make([][]any, len(payloads))
	for i, p := range payloads {
		rows[i] = []any{p}
	}
	return e.retry(ctx, func() error {
		conn, err := e.w.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		err = conn.Raw(func(dc any) error {
			return e.d.CopyFrom(ctx, dc, "sluice_bench_raw", []string{"payload"}, rows)
		})
		if err != nil {
			return e.committed(fmt.Errorf("copy raw rows: %w", err))
		}
		return nil
	})
}

// rawValues inserts the rows with multi-row INSERT statements in one
// transaction, a statement per chunk (chunks: at most maxChunkRows rows,
// below SQLite's variable limit, and about maxChunkBytes, below MariaDB's
// packet limit).
func (e *Engine) rawValues(ctx context.Context, payloads [][]byte) error {
	parts := chunks(len(payloads), func(i int) int { return len(payloads[i]) })
	// Prepare before the transaction: preparing takes a connection of the
	// pool, which may have only one (SQLite's writer).
	stmts := make([]*sql.Stmt, len(parts))
	for i, c := range parts {
		st, err := e.rawRowsStmt(ctx, c[1]-c[0])
		if err != nil {
			return err
		}
		stmts[i] = st
	}
	return e.inTx(ctx, func(tx *sql.Tx) error {
		for i, c := range parts {
			args := make([]any, 0, c[1]-c[0])
			for _, p := range payloads[c[0]:c[1]] {
				args = append(args, p)
			}
			if _, err := tx.StmtContext(ctx, stmts[i]).ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("%s of %d rows: %w", qBenchInsert, len(args), err)
			}
		}
		return nil
	})
}

// rawRowsPrefix starts the names under which multi-row statements are
// kept among the engine's prepared statements (which Close closes).
const rawRowsPrefix = qBenchInsert + " rows="

// rawRowsStmt returns BenchInsert for n rows, prepared on the write pool.
func (e *Engine) rawRowsStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	key := stmtKey{e.w, fmt.Sprintf("%s%d", rawRowsPrefix, n)}
	e.stmtMu.Lock()
	defer e.stmtMu.Unlock()
	if st, ok := e.stmts[key]; ok {
		return st, nil
	}
	text, err := valuesRows(e.q[qBenchInsert], n)
	if err != nil {
		return nil, err
	}
	st, err := e.w.PrepareContext(ctx, text)
	if err != nil {
		return nil, e.wrap(fmt.Errorf("prepare %s: %w", key.name, err))
	}
	e.stmts[key] = st
	return st, nil
}

// valuesRows returns a single-row INSERT ... VALUES (...) statement
// repeated for n rows: its VALUES row, plain "?" placeholders only,
// written n times. It builds placeholders, never values: every payload
// travels as a parameter.
func valuesRows(insert string, n int) (string, error) {
	i := strings.LastIndex(strings.ToUpper(insert), "VALUES")
	if i < 0 || n < 1 {
		return "", fmt.Errorf("sluice: engine: cannot repeat the VALUES row of %q %d times", insert, n)
	}
	row := strings.TrimSpace(insert[i+len("VALUES"):])
	if !strings.HasPrefix(row, "(") || !strings.HasSuffix(row, ")") || strings.ContainsAny(row, "$:@") ||
		strings.ContainsFunc(row, func(r rune) bool { return r >= '0' && r <= '9' }) {
		return "", fmt.Errorf("sluice: engine: the VALUES row %q of %q is not one row of plain ? placeholders", row, insert)
	}
	var b strings.Builder
	b.WriteString(insert[:i+len("VALUES")])
	b.WriteByte(' ')
	for k := range n {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String(), nil
}
