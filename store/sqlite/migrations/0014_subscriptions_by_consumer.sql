-- sluice schema, SQLite dialect, version 14: a stream's subscriptions by
-- consumer.
--
-- A listing of the subscriptions to one stream (or to a whole namespace)
-- selects and pages them by consumer, in the order of the consumers'
-- names in lower case (grants compare names so), then of their ids: this
-- index serves it, reading the rows of the page and not those of other
-- consumers. It extends sluice_stream_subscriptions_stream, which it
-- replaces.

CREATE INDEX sluice_stream_subscriptions_consumer
    ON sluice_stream_subscriptions (service, provider, namespace, stream_key, lower(consumer), id);
DROP INDEX sluice_stream_subscriptions_stream;
