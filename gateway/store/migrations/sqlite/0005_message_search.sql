-- 0005_message_search: a full-text index (FTS5) of the text parts of stored
-- messages, for an agent's search_history tool. Triggers on messages keep it:
-- each message's row has rowid session_pk * 2^24 + position (a session holds far
-- fewer than 2^24 messages), so a replaced or dropped message finds its row.

CREATE VIRTUAL TABLE message_search USING fts5(
    text,
    session_pk UNINDEXED,
    message_id UNINDEXED,
    role       UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
    INSERT INTO message_search (rowid, text, session_pk, message_id, role)
    SELECT new.session_pk * 16777216 + new.position, group_concat(json_extract(p.value, '$.text'), ' '),
           new.session_pk, new.message_id, new.role
    FROM json_each(new.body, '$.parts') AS p WHERE json_extract(p.value, '$.type') = 'text'
    HAVING count(*) > 0;
END;

CREATE TRIGGER message_search_update AFTER UPDATE OF body ON messages BEGIN
    DELETE FROM message_search WHERE rowid = old.session_pk * 16777216 + old.position;
    INSERT INTO message_search (rowid, text, session_pk, message_id, role)
    SELECT new.session_pk * 16777216 + new.position, group_concat(json_extract(p.value, '$.text'), ' '),
           new.session_pk, new.message_id, new.role
    FROM json_each(new.body, '$.parts') AS p WHERE json_extract(p.value, '$.type') = 'text'
    HAVING count(*) > 0;
END;

CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN
    DELETE FROM message_search WHERE rowid = old.session_pk * 16777216 + old.position;
END;

INSERT INTO message_search (rowid, text, session_pk, message_id, role)
SELECT m.session_pk * 16777216 + m.position, group_concat(json_extract(p.value, '$.text'), ' '),
       m.session_pk, m.message_id, m.role
FROM messages AS m, json_each(m.body, '$.parts') AS p
WHERE json_extract(p.value, '$.type') = 'text'
GROUP BY m.session_pk, m.position;
