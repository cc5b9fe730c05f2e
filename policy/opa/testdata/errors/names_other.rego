package acme.helpers

# Outside turngate's packages: left alone.
x := 1
