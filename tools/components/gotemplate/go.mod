module gpuhook.dev/tests/components/gotemplate

go 1.26
