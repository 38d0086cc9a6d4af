"""What runs beside student code: loading an implementation, running scenarios and recording them as data."""
