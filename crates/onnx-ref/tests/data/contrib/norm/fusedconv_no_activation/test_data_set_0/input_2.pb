BbJLû+<DZ
@
@À