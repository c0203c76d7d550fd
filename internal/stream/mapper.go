package stream

import "hash/fnv"

// DefaultPartitions is the number of partitions streams hash onto unless
// configured otherwise.
const DefaultPartitions = 16

// PartitionOf maps a stream onto one of n partitions: the 64-bit FNV-1a
// hash of the namespace, a zero byte and the key, modulo n. The mapping
// is part of the storage format: every node and every version must
// compute the same one, or events land where no agent reads them.
func PartitionOf(namespace, key string, n int32) int32 {
	h := fnv.New64a()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int32(h.Sum64() % uint64(n))
}
