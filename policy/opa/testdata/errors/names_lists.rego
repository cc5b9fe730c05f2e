package acme.lists

# Used by a decision module: a rule named like a decision is fine here.
block := {"delete"}
