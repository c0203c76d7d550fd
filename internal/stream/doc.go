// Package stream is the runtime of persistent streams, after the Orleans
// pulling architecture: a stable hash maps each stream onto one of a fixed
// number of partitions; for each partition a node owns, a pulling agent
// reads the partition's log in batches into a bounded cache of resident
// windows (a lagging subscription reads a window of its own, so it holds
// up no one else), walks one cursor per subscription over its window, and delivers each subscription's
// events in order per stream, streams in parallel, at least once. Progress
// is stored per subscription, and the partition's checkpoint is the
// lowest position every subscription is done with; retention trims
// behind it. A manager starts and stops agents as a balancer assigns
// partitions.
package stream
