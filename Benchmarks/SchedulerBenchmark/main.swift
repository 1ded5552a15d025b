print("being written")
