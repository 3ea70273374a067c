"""A saved run read back as data: files.py reads a run directory's files (inside it, regular
files only, size-capped, decoded with a message that names the file); kernel.py decodes a
saved kernel's records by type. run_directory.py is their one caller for run layouts."""
