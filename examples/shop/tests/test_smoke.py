import shop


def test_package_imports() -> None:
    assert shop.__doc__
