-- 0005_message_search: PostgreSQL searches the text parts of a session's
-- messages at query time (to_tsvector over the stored JSON, the 'simple'
-- configuration, as SQLite's unicode61 tokenizer: no stemming); a search is
-- scoped to one session, which the messages primary key already indexes. This
-- version only keeps both drivers' version numbers the same.
SELECT 1;
