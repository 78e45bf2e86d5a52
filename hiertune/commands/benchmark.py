def register(p): pass
def run(a): return 0
