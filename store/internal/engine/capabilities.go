package engine

import (
	"fmt"
	"sort"
)

// Capabilities is what a dialect's driver and SQL can do beyond what
// every dialect does. Each backend declares its own; the engine branches
// on these fields, never on which queries a dialect happens to define.
// A capability that needs optional queries names them, and New refuses
// a dialect whose queries and capabilities disagree.
type Capabilities struct {
	// TxMigrations runs each migration in its own transaction (PostgreSQL);
	// otherwise MigrateLock is expected to open one (SQLite) or DDL is not
	// transactional at all (MySQL).
	TxMigrations bool
	// LockResult says MigrateLock returns one value, 1 when it took the
	// lock (MySQL's GET_LOCK); otherwise it fails or blocks instead.
	LockResult bool
	// LastInsertID says ReserveSeqs sets LAST_INSERT_ID to the queue's new
	// last_seq, and InsertBody to the new body's id (MySQL has no UPDATE
	// ... RETURNING, nor INSERT ... RETURNING); otherwise each returns
	// that number as its one row.
	LastInsertID bool
	// NotifyOnReserve says ReserveSeqs takes the queue's notify payload
	// (Hub.NotifyPayload) as a fifth argument and notifies listeners of
	// it itself, sparing the Notify round trip of every enqueue.
	NotifyOnReserve bool
	// LeasePerRequest says LeaseMessages takes one lease request's
	// messages (lock_token, visible_at, service, provider, queue, seqs)
	// instead of a group's rows (service, provider, queue, rows): where a
	// statement costs no round trip (SQLite), the simple one is faster.
	LeasePerRequest bool
	// ArrayInserts says InsertMessages takes its rows as one array a
	// column (seqs, states, ..., payloads as bytea[]), which the driver
	// binds in binary, instead of one JSON list with hex-encoded payloads
	// for the server to parse and decode (PostgreSQL with pgx).
	ArrayInserts bool
	// Notify says the dialect wakes other processes from inside a
	// transaction, delivered when it commits (query Notify).
	Notify bool
	// RowInserts says messages and records are inserted one statement a
	// row (queries InsertMessage and InsertRecord), where a statement
	// costs no round trip (SQLite); otherwise a statement inserts a batch
	// given as JSON (queries InsertMessages and InsertRecords).
	RowInserts bool
	// CompleteStatement says a group of completes runs as one statement
	// (query CompleteMessages) when nothing else needs the held rows.
	CompleteStatement bool
	// EnqueueStatement says a lone enqueue to a queue without duplicate
	// detection numbers and inserts its messages in one statement (query
	// EnqueueMessages).
	EnqueueStatement bool
	// LeaseStatement says a lone lease runs as one statement (query
	// LeaseAlone).
	LeaseStatement bool
	// BumpHeadReturning says one statement takes a partition's positions,
	// reads them back and notifies (query BumpHeadReturning).
	BumpHeadReturning bool
	// AppendStatement says a group's appends to several partitions are
	// written by one statement (query AppendRecords).
	AppendStatement bool
	// ReadyFloor says leases scan a queue's ready messages from its ready
	// floor, which the statements that make messages ready again lower
	// and the engine raises (query RaiseReadyFloor) when LeaseAlone, whose
	// last column it then is, finds it far behind (see floor.go), and
	// which a deleted queue's floors go with (DeleteQueueReadyFloors,
	// after DeleteQueueMessages). It needs LeaseStatement.
	ReadyFloor bool
}

// capabilityQueries maps each capability to the optional queries a
// dialect defines when it has the capability (with) and when it does
// not (without).
var capabilityQueries = []struct {
	name          string
	has           func(Capabilities) bool
	with, without []string
}{
	{"Notify", func(c Capabilities) bool { return c.Notify }, []string{qNotify}, nil},
	{"RowInserts", func(c Capabilities) bool { return c.RowInserts },
		[]string{qInsertMessage, qInsertRecord}, []string{qInsertMessages, qInsertRecords}},
	{"CompleteStatement", func(c Capabilities) bool { return c.CompleteStatement }, []string{qCompleteMessages}, nil},
	{"EnqueueStatement", func(c Capabilities) bool { return c.EnqueueStatement }, []string{qEnqueueMessage, qEnqueueMessages}, nil},
	{"LeaseStatement", func(c Capabilities) bool { return c.LeaseStatement }, []string{qLeaseAlone}, nil},
	{"BumpHeadReturning", func(c Capabilities) bool { return c.BumpHeadReturning }, []string{qBumpHeadReturning}, nil},
	{"AppendStatement", func(c Capabilities) bool { return c.AppendStatement }, []string{qAppendRecord, qAppendRecords}, nil},
	{"ReadyFloor", func(c Capabilities) bool { return c.ReadyFloor }, []string{qRaiseReadyFloor, qDeleteQueueReadyFloors}, nil},
}

// optionalQueries lists the queries that only some dialects define, each
// required by one state of one capability.
var optionalQueries = func() map[string]bool {
	m := make(map[string]bool)
	for _, c := range capabilityQueries {
		for _, n := range c.with {
			m[n] = true
		}
		for _, n := range c.without {
			m[n] = true
		}
	}
	return m
}()

// optionalIn returns the optional queries the capabilities require,
// sorted.
func (c Capabilities) optionalIn() []string {
	var names []string
	for _, cq := range capabilityQueries {
		if cq.has(c) {
			names = append(names, cq.with...)
		} else {
			names = append(names, cq.without...)
		}
	}
	sort.Strings(names)
	return names
}

// check reports a dialect whose queries disagree with its capabilities:
// a query that one of them needs is missing, or an optional query is
// defined that none of them uses.
func (c Capabilities) check(queries map[string]string) error {
	if c.ReadyFloor && !c.LeaseStatement {
		return fmt.Errorf("capability ReadyFloor needs LeaseStatement")
	}
	for _, cq := range capabilityQueries {
		need, unused := cq.with, cq.without
		if !cq.has(c) {
			need, unused = cq.without, cq.with
		}
		for _, n := range need {
			if _, ok := queries[n]; !ok {
				return fmt.Errorf("query %s is missing (capability %s is %t)", n, cq.name, cq.has(c))
			}
		}
		for _, n := range unused {
			if _, ok := queries[n]; ok {
				return fmt.Errorf("query %s is defined, but capability %s is %t", n, cq.name, cq.has(c))
			}
		}
	}
	return nil
}
