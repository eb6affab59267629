from tickwork.cli import main

main()
