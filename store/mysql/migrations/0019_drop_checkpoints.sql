-- sluice schema, MySQL/MariaDB dialect, version 19: drop sluice_checkpoints.
--
-- It held per-consumer checkpoints that the store stopped offering when
-- stream subscriptions took over their positions (sluice_stream_progress
-- and, per partition, sluice_partition_checkpoints). Nothing has read or
-- written it since; its rows, if any, are dropped with it.
DROP TABLE IF EXISTS sluice_checkpoints;
