"""(being written)"""


def add_arguments(parser):
    pass


def main(args):
    raise NotImplementedError("handson_lib.allreduce_bench is being written")
